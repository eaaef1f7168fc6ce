"""The async face: ``astream`` and its sample stream."""
