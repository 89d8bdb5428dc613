def pytest_configure(config):
    config.addinivalue_line("markers", "slow: runs a candidate in a sandboxed child (seconds each)")
