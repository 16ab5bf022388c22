"""The optimization loop: retrieval -> directions -> generate -> evaluate -> record."""
