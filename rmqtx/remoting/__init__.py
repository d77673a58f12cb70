"""rmqtx.remoting"""
