"""Share groups (KIP-932 "queues", seed 001): membership, heartbeat and the SimpleAssignor."""
