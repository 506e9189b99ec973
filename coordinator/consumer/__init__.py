"""KIP-848's consumer group protocol on the group coordinator (Kafka 4.2's GroupMetadataManager and
ConsumerGroup), built here a piece at a time: first the server-side assignors."""
