"""Model providers: the Provider protocol and its adapters."""
