"""The demo shop: products, a cart's total, a health check."""
