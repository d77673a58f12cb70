"""RocketMQ SQL92 message filter: selector compiler and the consume-queue bloom bit map."""
from rmqtx.filter.bitmap import BitsArray, BloomFilter, BloomFilterData, calc_bitmap, consumer_bloom_key, is_hit
from rmqtx.filter.javalang import FilterEvalError
from rmqtx.filter.sql92 import CompiledExpression, FilterSyntaxError, compile_cached, compile_expression

__all__ = [
    "BitsArray", "BloomFilter", "BloomFilterData", "CompiledExpression", "FilterEvalError",
    "FilterSyntaxError", "calc_bitmap", "compile_cached", "compile_expression", "consumer_bloom_key",
    "is_hit",
]
