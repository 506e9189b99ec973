"""Who a connection is and what it may do: listeners, TLS, SASL, principals (issue 10)."""
