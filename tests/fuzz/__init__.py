"""A structured fuzz of the gateway's request parsing (issue 10): requests generated from kio's
schemas for every advertised (API, version), then broken in the ways a hostile or buggy client
breaks them. `python -m tests.fuzz --frames N` is the soak; tests/unit/test_fuzz_connection.py
and tests/integration/test_fuzz_gateway.py run it in CI."""
