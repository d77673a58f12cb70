"""rmqtx.client"""
