"""rmqtx.spark"""
