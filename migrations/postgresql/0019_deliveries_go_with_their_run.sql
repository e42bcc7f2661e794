-- A webhook delivery is deleted with its run (retention or DELETE /crawls/{id}):
-- the service deletes both in one transaction, found by this index. Deliveries
-- that older versions kept behind runs already deleted are dropped here.

CREATE INDEX service_delivery_crawl ON service_delivery (crawl_id);

DELETE FROM service_delivery d
WHERE NOT EXISTS (SELECT 1 FROM service_crawl c WHERE c.id = d.crawl_id);
