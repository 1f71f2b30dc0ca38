"""Data: the data group's schema and the .csv quoting option (``config``), raw sources (``sources``), the shared
data-module base (``base``), the pre-training corpus and its data module (``corpus``, ``windows``, ``pretrain``:
``PretrainDataModule``) and a task's splits and data module (``task_rows``, ``task_encoding``, ``task_batches``,
``tasks``: ``TaskDataModule``)."""
