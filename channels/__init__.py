"""Channel adapters: each turns a platform into bus messages and delivers replies back."""
