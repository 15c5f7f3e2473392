"""Planning and billing before anything is sent: every request counted (text, images, sound) as
the provider will, the provider's limits and prompt-cache rules (providers.json), the prices
(prices.json), and the plan as a typed record (plan.json)."""
