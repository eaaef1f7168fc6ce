"""Private package; see litstream for the public API."""
