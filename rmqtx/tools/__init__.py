"""rmqtx.tools"""
