"""rmqtx.filter"""
