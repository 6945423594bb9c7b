"""The event log: what every change records (decisions §8.1) and how it is read."""
