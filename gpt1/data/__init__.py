"""Data: raw rows from local files or the hub (``sources``: a ``Source``, a ``Format`` per file extension; a file's
encoding: ``encodings``; a table's conversion into datasets' cache: ``conversion``), the data group's schema
(``data_config``), the data-module base (``base``) with the loaders' exact resume (``loader``) and the shared cache
(``cache``); the pre-training corpus and its data module (``corpus``, ``windows``, ``pretrain_data``:
``PretrainDataModule``) and a task's splits and its data module (``task_rows``, ``task_encoding``, ``task_batches``,
``task_data``: ``TaskDataModule``)."""
