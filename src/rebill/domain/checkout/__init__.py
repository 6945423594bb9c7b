"""Checkouts: a cart a buyer pays once, which becomes a customer, an address, subscriptions,
a charge of type checkout and its order (spec 02 Checkouts, decisions §7.3, §7.7)."""
