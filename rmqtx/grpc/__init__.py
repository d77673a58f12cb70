"""The gRPC endpoint (``apache.rocketmq.v2.MessagingService``) the RocketMQ 5.x SDKs speak."""
