int fg_store_placeholder_;
