"""Webhooks: target checks, signing (Standard Webhooks), the outbox and its dispatcher."""
