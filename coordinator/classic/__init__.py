"""Classic consumer groups (seeds 000, 002, 003, 004; Kafka's ClassicGroup and GroupMetadataManager)."""
