"""The typed media wrappers and their serializers."""
