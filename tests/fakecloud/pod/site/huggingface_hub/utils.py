"""The two errors of huggingface_hub.utils that auth_check raises (GatedRepoError is a RepositoryNotFoundError)."""


class RepositoryNotFoundError(Exception):
    pass


class GatedRepoError(RepositoryNotFoundError):
    pass
