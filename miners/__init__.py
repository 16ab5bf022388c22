"""Miners: git history -> classified optimization commits -> ideas and thoughts in the graph."""
