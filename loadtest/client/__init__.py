"""A light Kafka client on kio for load tests: thousands of group members in one process."""
