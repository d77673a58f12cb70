"""rmqtx.broker"""
