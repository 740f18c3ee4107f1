"""Retrieval memory across sessions: units from messages, hybrid search, rendering with dates."""
