"""rmqtx.store"""
