"""rmqtx.namesrv"""
