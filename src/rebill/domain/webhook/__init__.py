"""Webhook subscriptions, the outbox of deliveries and their sending (decisions §8)."""
