"""Stateful, design-document APIs over the functional core."""
