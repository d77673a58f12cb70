"""Small helpers shared by every part of rmqtx (no imports from other rmqtx packages)."""
