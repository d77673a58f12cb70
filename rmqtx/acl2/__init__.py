"""ACL 2.0 (RocketMQ 5.3+, RIP-68): users, ACL policies, their checks and admin codes."""
