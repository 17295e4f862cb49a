"""Benchmarks behind ``robotrl bench <name>``; each returns a JSON-able dict."""
