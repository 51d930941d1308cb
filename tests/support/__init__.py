"""What the tests share: the one way to start cofferd, helpers, generated samples and fakes.
Benches may import this package too (never a test module)."""
