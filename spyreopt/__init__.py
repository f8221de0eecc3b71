"""spyreopt: joint planning of work division, layout, residency, relayouts and addresses."""
