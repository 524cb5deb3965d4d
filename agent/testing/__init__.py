"""Test helpers other packages may reuse: scripted providers, tools and wire formats.

Helpers, not tests: nothing here runs by itself, and nothing here touches the network.
"""
