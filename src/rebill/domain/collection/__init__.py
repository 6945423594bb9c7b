"""Collections: a store's named groups of catalog products (issue 15)."""
