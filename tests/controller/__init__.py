"""The 5.x controller (twistd rmqcontroller)."""
