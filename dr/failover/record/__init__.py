"""The failover's ground floor: what both the frame and act write — metrics, the journal's documents, the team store."""
