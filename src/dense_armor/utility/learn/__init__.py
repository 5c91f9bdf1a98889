"""Online learning of residual robot dynamics (the design document's API)."""
