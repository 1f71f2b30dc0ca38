"""Data: raw rows from local files or the hub (``sources``: a ``Source``; ``formats``: a ``Format`` per file extension;
``encodings``: a file's encoding; ``read_errors``: what is wrong with a file that does not read; ``conversion``: a
table into datasets' cache, rows of any size), the data group's schema (``data_config``), the data-module base
(``base``) with the training order and the loaders' exact resume (``loader``) and the shared cache (``cache``); the
pre-training corpus and its data module (``corpus``, ``windows``, ``pretrain_data``: ``PretrainDataModule``). A task's
data is the task package's (``gpt1.tasks``)."""
