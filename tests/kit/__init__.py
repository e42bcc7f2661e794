"""Helpers shared by the tests: loopback sites and servers, crawls on either backend."""
