"""Offline model providers registered with Inspect as ``bedside/scripted`` and ``bedside/local``."""
