"""Operations, one module per resource; each group works inside one organization's `Scope`."""
