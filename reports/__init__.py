"""Reports over results: the grid report (``report``: markdown, HTML or PNG; heatmaps, occupancy, cost of
retention), tables and their formatting, and the views ``commands`` prints for `simulate`."""
