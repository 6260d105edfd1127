"""Benchmarks of agents: datasets, resumable sweeps, judges, behavioural metrics and reports."""
